"""Spark jobs over trace corpora (issue 7): not built yet."""
