"""Delivery: answering for the lease, whatever happened to the case. The `Deliver` stage
(`stage`) reports through `Delivery` (`reports`): a result kept on disk until the server
answers for it (`spool`), sent alone or with others that finish together (`batches`); a
failure; a case handed back, paused when its tool said it is rate limited (`ratelimit`)."""
