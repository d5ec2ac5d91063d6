"""The recurrent scheduler of origin visits (the seed's second scheduler):
the listed origins' next visits chosen and sent to the loaders
(:mod:`.scheduler`), and the outcome of each visit fed back, from the
archive's journal (:mod:`.journal`) or the workers' events (:mod:`.events`).

Its pure half (what an origin and a visit are, the visit policy) is in
:mod:`..visits`, below the store; this room reads and writes through the
store and publishes through the broker."""
