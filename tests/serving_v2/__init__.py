"""DDTree 2.1.0 on REAL sglang 0.5.23 servers (DFlashWorkerV2, overlap scheduler)."""
