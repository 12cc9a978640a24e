"""Ray Serve embedder: the deployment that runs the classifier core behind Serve's gRPC proxy."""
