"""What the benchmark scripts share: the query set, servers on free ports, CPU accounting, the light
load generator, the raw in-process floor and the tables. The scripts on top stay thin."""

import os

# Same defaults as the test suite: never reach for the network, and keep the tokenizers' own
# thread pool out of the CPU contest on small machines.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
