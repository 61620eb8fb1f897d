"""`pypto-build ci`: many build directories, keep going, reports (run); which machine builds which
directory (shards); merging the shards' reports (report, `pypto-build ci-report`). A plain folder."""
