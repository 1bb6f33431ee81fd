"""Judges (protocol 3): a judge-graded case's verdict comes from judge jobs run on the
submitter's own runners; the server reads their answers strictly and takes the majority."""
