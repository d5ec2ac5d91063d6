"""Schedule health counted where the data is: the census that keeps the
condition ledger current and stores its counts (:mod:`.census`).

Owns the step that assesses changed tasks with the policy and stores a
census; may import the policy, the conditions and the store's interface,
never a daemon (the monitor and the API call it)."""
