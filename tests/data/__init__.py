"""Fixture data of the tests (a package, so test files import it as ``from data import golden``:
pytest puts tests/ on sys.path)."""
