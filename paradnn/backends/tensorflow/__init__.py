"""The tensorflow backend: everything paradnn runs in tensorflow (imported only when that framework is used)."""
