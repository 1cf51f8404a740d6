import Testing
@testable import SalvoEngine

/// The stream table against a dictionary: streams open in id order and close in any order,
/// some stay open long (the ones that make runs and displaced entries).
@Suite struct ClientStreamsTests {
    @Test func itAgreesWithADictionaryThroughOpensClosesAndGrowth() {
        var streams = ClientStreams(capacity: 4)
        var model: [Int32: Int32] = [:]
        var random = SystemRandomNumberGenerator()
        var nextID: Int32 = 1
        for step in 0..<20_000 {
            // Open more while few are open; close a random one (often the oldest) otherwise.
            if model.isEmpty || (model.count < 300 && Bool.random(using: &random)) {
                let place = streams.insert(ClientStream(id: nextID, entry: Int32(step)))
                #expect(streams[place].id == nextID)
                model[nextID] = Int32(step)
                nextID += 2
            } else {
                let id = Int.random(in: 0..<4, using: &random) == 0 ? model.keys.min()! : model.keys.randomElement(using: &random)!
                let place = streams.find(id)!
                #expect(streams[place].entry == model[id])
                streams.remove(at: place)
                model[id] = nil
            }
            #expect(streams.count == model.count)
            if step % 500 == 0 {
                for id in stride(from: Int32(1), to: nextID, by: 2) {
                    #expect(streams.find(id).map { streams[$0].entry } == model[id], "stream \(id) at step \(step)")
                }
            }
        }
        var removed: [Int32] = []
        let cut = nextID / 2
        streams.removeAll(where: { $0.id > cut }) { removed.append($0.id) }
        #expect(Set(removed) == Set(model.keys.filter { $0 > cut }))
        #expect(streams.count == model.keys.filter { $0 <= cut }.count)
    }
}
