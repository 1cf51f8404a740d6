import Foundation

/// `read()` once `condition` holds of it, or its last value after `limit`: how tests wait
/// for a mock to count what a sender said it settled (the mock counts on its own threads).
public func eventually<Value>(_ read: () -> Value, within limit: Duration = .seconds(20),
                              until condition: (Value) -> Bool) -> Value {
    let deadline = ContinuousClock.now + limit
    var value = read()
    while !condition(value) && ContinuousClock.now < deadline {
        usleep(2_000)
        value = read()
    }
    return value
}
