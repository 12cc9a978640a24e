"""What the benchmark scripts share: the query set, servers on free ports, CPU accounting, the light
load generator, the raw in-process floor and the tables. The scripts on top stay thin."""

import os

# Never reach for the network. The tokenizer's threads are left to the product's own setting
# (tokenizer_threads), in the floor and in every server, so a bench measures what a user runs.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
