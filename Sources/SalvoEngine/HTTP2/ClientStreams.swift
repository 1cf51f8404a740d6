/// One open stream of a `ClientSession`.
struct ClientStream {
    /// 0: an empty place in the table.
    var id: Int32 = 0
    /// The connection's name for it (`ClientSessionDelegate`).
    var entry: Int32 = 0
    /// How many more body bytes the peer lets us send on it (may go below 0 when the peer
    /// lowers SETTINGS_INITIAL_WINDOW_SIZE): 32 bits, as the protocol's windows (sums are
    /// checked in `Int` first). A connection keeps a stream limit of these, so what is left
    /// of a body is kept only for the streams whose body waits (`ClientSession`).
    var sendWindow: Int32 = 0
}

/// The open streams by id: an open-addressed table with Robin Hood linear probing. Ids are
/// odd and increasing, so `id / 2` puts them in consecutive places, each at its home; the
/// table doubles when it is half full, so once it has grown to the connection's stream
/// limit nothing is allocated per stream. Robin Hood order (an entry never sits further
/// from its home than the one it passed) lets a lookup stop early and a deletion shift back
/// only the displaced entries after it: streams close roughly in the order they opened,
/// and a plain linear-probing deletion would walk the whole run of open streams each time.
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

    /// How far the entry at `place` sits from its home.
    private func displacement(_ place: Int) -> Int { (place - home(places[place].id)) & mask }

    /// Where stream `id` is, if it is open.
    func find(_ id: Int32) -> Int? {
        var place = home(id)
        var distance = 0
        // Past an entry nearer its home than `id` would be, `id` cannot be.
        while places[place].id != 0 && displacement(place) >= distance {
            if places[place].id == id { return place }
            place = (place + 1) & mask
            distance += 1
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
        var entry = stream
        var place = home(entry.id)
        var distance = 0
        var landed: Int?
        while places[place].id != 0 {
            // The incoming entry takes the place of one nearer its home, which moves on.
            if displacement(place) < distance {
                distance = displacement(place)
                swap(&entry, &places[place])
                landed = landed ?? place
            }
            place = (place + 1) & mask
            distance += 1
        }
        places[place] = entry
        count += 1
        return landed ?? place
    }

    mutating func remove(at place: Int) {
        // The displaced entries after it move one place nearer their homes.
        var hole = place
        var next = (hole + 1) & mask
        while places[next].id != 0 && displacement(next) > 0 {
            places[hole] = places[next]
            hole = next
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
        // Through a copy of the buffer, not `&self.places[place]`: Swift 6.3 under
        // ThreadSanitizer emits an invalid bitcast for that access (a compiler crash).
        let places = places
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
