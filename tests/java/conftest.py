"""The Java-written fixture tables (`java_templates`, `java_warehouse`) live in tests/conftest.py, so
that tests/java and tests/source share one build per session."""
