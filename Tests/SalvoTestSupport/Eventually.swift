import Foundation

/// `read()` once `condition` holds of it, or its last value after `limit`: how tests wait
/// for a mock to count what a sender said it settled (the mock counts on its own threads).
///
/// The default limit is generous because it is only reached when a test fails: in a full
/// parallel run on two cores, a test (and the task it waits for) may get no thread for
/// twenty seconds and more.
public func eventually<Value>(_ read: () -> Value, within limit: Duration = .seconds(60),
                              until condition: (Value) -> Bool) -> Value {
    let deadline = ContinuousClock.now + limit
    var value = read()
    while !condition(value) && ContinuousClock.now < deadline {
        usleep(2_000)
        value = read()
    }
    return value
}

/// `eventually` for async tests whose own tasks must go on meanwhile (a sender's producer
/// runs on the same cooperative threads): suspends between reads instead of blocking one.
/// `read` may itself suspend (a scrape with curl).
public func eventuallyYielding<Value>(_ read: () async -> Value, within limit: Duration = .seconds(60),
                                      until condition: (Value) -> Bool) async -> Value {
    let deadline = ContinuousClock.now + limit
    var value = await read()
    while !condition(value) && ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(2))
        value = await read()
    }
    return value
}
