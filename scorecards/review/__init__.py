"""The review queue (app `review`): the cases of a workspace's runs that need a person — judges
split, a judge's answer unreadable, flaky across repeats, protected files tampered with, an
error — walked with the keyboard; and how often each judge agrees with people.

- `models`: `Review`, one person's look at one result (pass, fail, confirm, note);
- `services`: `review_act` — pass and fail set a person's verdict through the verdicts
  service, confirm records agreement with the machine's verdict without overriding it (later
  regrades still apply), a note is kept;
- `selectors`: `review_queue` (what needs a person, who reviewed what, how many remain) and
  `people_agreement` (per judge, by prompt digest and model, with a Wilson interval);
- `replies`, `api`, `views`, `urls`: `GET /api/workspaces/<slug>/review`,
  `POST /api/results/<id>/review`, the page `/w/<slug>/review`.
"""
