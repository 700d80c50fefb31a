"""What the branch jobs share (create-branch, delete-branch, rename-branch, fast-forward): finding a
branch or refusing a missing one, copying metadata files between branch roots, and removing a deleted
branch's empty directories; and merge-branch's rules, plan and commit (`merge.py`)."""
