/// One open stream of a `ClientSession`.
struct ClientStream {
    /// 0: an empty place in the table.
    var id: Int32 = 0
    /// The connection's name for it (`ClientSessionDelegate`).
    var slot: Int32 = 0
    /// How many more body bytes the peer lets us send on it (may go below 0 when the peer
    /// lowers SETTINGS_INITIAL_WINDOW_SIZE).
    var sendWindow = 0
    /// Request body bytes not sent yet.
    var bodyLeft = 0
}

/// The open streams by id: an open-addressed table with linear probing. Ids are odd and
/// increasing, so `id / 2` spreads them over consecutive places; the table doubles when it
/// is half full, so once it has grown to the connection's stream limit nothing is
/// allocated per stream. Deletion shifts the following entries back (no tombstones).
struct ClientStreams: ~Copyable {
    private var places: UnsafeMutableBufferPointer<ClientStream>
    private(set) var count = 0

    init(capacity: Int = 64) {
        places = .allocate(capacity: capacity)
        places.initialize(repeating: ClientStream())
    }

    deinit { places.deallocate() }

    private var mask: Int { places.count - 1 }
    private func home(_ id: Int32) -> Int { Int(id >> 1) & mask }

    /// Where stream `id` is, if it is open.
    func find(_ id: Int32) -> Int? {
        var place = home(id)
        while places[place].id != 0 {
            if places[place].id == id { return place }
            place = (place + 1) & mask
        }
        return nil
    }

    subscript(place: Int) -> ClientStream {
        get { places[place] }
        nonmutating set { places[place] = newValue }
    }

    /// Adds `stream`; returns its place.
    @discardableResult
    mutating func insert(_ stream: ClientStream) -> Int {
        if 2 * (count + 1) > places.count { grow() }
        var place = home(stream.id)
        while places[place].id != 0 { place = (place + 1) & mask }
        places[place] = stream
        count += 1
        return place
    }

    mutating func remove(at place: Int) {
        var hole = place
        var next = (hole + 1) & mask
        while places[next].id != 0 {
            // An entry may move back into the hole unless the hole lies before its home.
            if (next - home(places[next].id)) & mask >= (next - hole) & mask {
                places[hole] = places[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        places[hole].id = 0
        count -= 1
    }

    /// Removes every stream `matches` picks, handing each to `removed`.
    mutating func removeAll(where matches: (ClientStream) -> Bool, _ removed: (ClientStream) -> Void) {
        var place = 0
        while place < places.count {
            let stream = places[place]
            guard stream.id != 0, matches(stream) else {
                place += 1
                continue
            }
            // The shift may have moved another stream into this place: look at it again.
            remove(at: place)
            removed(stream)
        }
    }

    /// Changes every open stream.
    func update(_ change: (inout ClientStream) -> Void) {
        for place in places.indices where places[place].id != 0 { change(&places[place]) }
    }

    private mutating func grow() {
        let old = places
        places = .allocate(capacity: 2 * old.count)
        places.initialize(repeating: ClientStream())
        count = 0
        for stream in old where stream.id != 0 { insert(stream) }
        old.deallocate()
    }
}
