"""The torch backend: everything paradnn runs in torch (imported only when that framework is used)."""
