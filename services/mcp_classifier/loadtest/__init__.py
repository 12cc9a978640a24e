"""Load tests with Locust: the workload (locustfile.py, self-contained), the runner and its report."""
