"""The live-table soak (issue #28): Paimon's Java writer commits while our maintenance runs.

`ledger` knows the tables, makes each batch of rows and folds the batches into the rows expected at
any point; `checks` judges a table at a checkpoint (rows, files, orphans, snapshot ids); `run` drives
Java's writer, our jobs and the checkpoints, and prints the figures. `scripts/soak.py` is the command.
"""
