/// Carries a value that belongs to the loop thread through another thread and back: the journal's callbacks
/// run on its syncer thread, which only posts the value back to the loop without touching it.
struct LoopBound<Value>: @unchecked Sendable {
    let value: Value

    init(_ value: Value) {
        self.value = value
    }
}
