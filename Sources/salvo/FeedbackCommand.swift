import ArgumentParser

struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "feedback", abstract: "Not yet implemented.")
    func run() async throws { throw ValidationError("salvo feedback is not implemented yet") }
}
