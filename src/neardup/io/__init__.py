"""Reading documents and fingerprints, and writing outputs atomically."""
