"""Small helpers with no dependency on the rest of the package."""
