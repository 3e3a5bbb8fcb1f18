"""The console's pages, one module per page (or per form), each a function of the
`callgate.console.site.Console`, the request and, for pages that read the ledger,
the signed-in principal. `callgate.console.app.create_app` maps them to routes:

* ``inbox``: ``GET /approvals``, each pending request with its exact effect, its
  arguments, its provenance findings and the approve / deny form;
* ``approval``: ``GET /approval?id=``, one request, its decision and its records;
* ``decide``: ``POST /approval/decide``, approve or deny (CSRF-checked), recorded as
  the signed-in principal;
* ``runs``: ``GET /runs``, runs, most recent first, and the stage funnel of their calls;
* ``run``: ``GET /run?id=``, a run's timeline in journal order;
* ``call``: ``GET /call?run=&id=``, one call, its attempts, its records and the chain's
  verification;
* ``session``: ``GET /login``, ``POST /login``, ``POST /logout``;
* ``plain``: ``/`` (to the inbox), ``/healthz``, the stylesheet.
"""
