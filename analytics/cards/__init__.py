"""Judge leaderboard across projects and evaluation cards (docs/JUDGE_TRUST.md): both read
stored report snapshots only, never compute a report."""
