"""The judge trust report (docs/JUDGE_TRUST.md): how far a judge can stand in for people,
skill by skill. Pure computations (no Django), like analytics.metrics and analytics.bootstrap:
the report (analytics.report) computes them from report rows and the extra inputs the
selectors read, and stores them in the report snapshot under the "trust" key."""
