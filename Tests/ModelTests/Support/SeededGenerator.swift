import Model

/// Model's SplitMix64, seeded, so that every random test can be replayed from its seed.
typealias SeededGenerator = SplitMix64
