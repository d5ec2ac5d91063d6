"""The domain: what a task type, a task and a run are, and the words for
them. Frozen, validated values (:mod:`.model`, :mod:`.run_model`), their
enumerations and constants (:mod:`.enums`), the exception tree every face
translates (:mod:`.exceptions`), checks of stored text and values
(:mod:`.validation`), the records the store returns to the monitor and the
worker's lease (:mod:`.records`, :mod:`.lease`), JSON-safe views
(:mod:`.jsonable`) and the wording of durations and reasons (:mod:`.text`).

The ground floor: it imports nothing of the package but itself."""
