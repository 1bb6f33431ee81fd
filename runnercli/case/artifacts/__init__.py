"""Artifacts: the files a case leaves, named by its harness's `artifacts` globs (`globs`), kept
until the result naming them is delivered (`shelf`), uploaded as blobs of the job's workspace
(`upload`, through `calls`: `have_blobs`, `put_blob`), and the `Artifacts` stage (`stage`)."""
