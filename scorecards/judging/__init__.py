"""Judges (app `judging`, protocol 3): a judge-graded case's verdict comes from judge jobs run
on the submitter's own runners; the server reads their answers strictly and takes the majority.

- `models`: one vote (`Judgement`) per judge job of a result;
- `answers`: a judge's answer read strictly, and the majority of several (pure);
- `services`: judge jobs queued, their answers recorded, the case decided;
- `lane`: how judges join a run's start, settlement and summary (`scorecards.lifecycle`).
"""
