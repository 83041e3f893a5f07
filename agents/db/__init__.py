"""How the hot path talks to the database fast: prepared queries, column domains, storable
text, rows built without `Model.__init__`, the day-money upsert, C-parsed timestamps."""
