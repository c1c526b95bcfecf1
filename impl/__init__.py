"""The Trio reference broker (issue 5): not built yet. It must never import `spec`."""
