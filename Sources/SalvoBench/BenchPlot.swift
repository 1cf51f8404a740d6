import Foundation

/// A small line chart written as SVG text, with no dependency: labelled axes, grid lines,
/// one coloured line with markers per series (solid or in a dash pattern), a legend, and
/// dashed grey horizontal reference lines (the ceiling, a baseline). `results/throughput.svg`
/// is one of these.
///
/// X values are categories (connections: 1, 2, 4, 8), spaced evenly in sorted order; the
/// Y axis starts at zero and ends at a round number.
package struct SVGLinePlot: Sendable {
    /// One line: its legend label, its points and how it is drawn.
    package struct Series: Sendable {
        package var label: String
        package var points: [(x: Double, y: Double)]
        /// Index into `palette`; nil: the series' own position.
        package var colour: Int?
        /// An SVG `stroke-dasharray` such as "8 5"; nil: a solid line.
        package var dashes: String?

        package init(label: String, points: [(x: Double, y: Double)], colour: Int? = nil, dashes: String? = nil) {
            self.label = label
            self.points = points
            self.colour = colour
            self.dashes = dashes
        }

        func stroke(_ index: Int) -> String {
            "stroke=\"\(SVGLinePlot.palette[(colour ?? index) % SVGLinePlot.palette.count])\" stroke-width=\"2.5\""
                + (dashes.map { " stroke-dasharray=\"\($0)\"" } ?? "")
        }
    }

    /// A dashed horizontal line across the plot (the ceiling, a baseline).
    package struct Reference: Sendable {
        package var label: String
        package var y: Double

        package init(label: String, y: Double) {
            self.label = label
            self.y = y
        }
    }

    package var title: String
    package var subtitle: String = ""
    package var xLabel: String
    package var yLabel: String
    package var series: [Series] = []
    package var references: [Reference] = []
    package var width = 760.0
    package var height = 460.0
    /// Formats a Y tick value (default: "1.5 M" style).
    package var formatY: @Sendable (Double) -> String = SVGLinePlot.shortNumber

    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

    /// Dash patterns that tell lines of one colour apart: solid first.
    static let dashPatterns: [String?] = [nil, "8 5", "2 4", "12 4 2 4"]

    /// A reference line further above the data than this factor is named in the legend
    /// instead of drawn, so that it does not squash the lines into the bottom of the chart.
    static let referenceScaleLimit = 2.5

    package init(title: String, subtitle: String = "", xLabel: String, yLabel: String) {
        self.title = title
        self.subtitle = subtitle
        self.xLabel = xLabel
        self.yLabel = yLabel
    }

    /// The SVG document.
    package func render() -> String {
        let left = 86.0, right = 24.0, top = subtitle.isEmpty ? 52.0 : 70.0, bottom = 62.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom
        let xValues = Array(Set(series.flatMap { $0.points.map(\.x) })).sorted()
        let dataMax = series.flatMap { $0.points.map(\.y) }.max() ?? 0
        let drawn = references.filter { dataMax == 0 || $0.y <= dataMax * Self.referenceScaleLimit }
        let offScale = references.filter { dataMax > 0 && $0.y > dataMax * Self.referenceScaleLimit }
        // Headroom above the data for the legend, which sits in the top left corner.
        let (yMax, yStep) = Self.niceScale(max(dataMax * (1 + 0.09 * Double(series.count + offScale.count)), drawn.map(\.y).max() ?? 0))

        func xPosition(_ x: Double) -> Double {
            guard let index = xValues.firstIndex(of: x) else { return left }
            if xValues.count == 1 { return left + plotWidth / 2 }
            return left + plotWidth * (0.06 + 0.88 * Double(index) / Double(xValues.count - 1))
        }
        func yPosition(_ y: Double) -> Double { top + plotHeight * (1 - y / yMax) }

        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Self.n(width))" height="\(Self.n(height))" \
            viewBox="0 0 \(Self.n(width)) \(Self.n(height))" font-family="Helvetica, Arial, sans-serif" font-size="13">
            <rect x="0" y="0" width="\(Self.n(width))" height="\(Self.n(height))" fill="#ffffff"/>
            <text x="\(Self.n(width / 2))" y="26" text-anchor="middle" font-size="17" font-weight="bold">\(Self.escape(title))</text>

            """
        if !subtitle.isEmpty {
            svg += "<text x=\"\(Self.n(width / 2))\" y=\"46\" text-anchor=\"middle\" fill=\"#555555\">\(Self.escape(subtitle))</text>\n"
        }
        // Grid and Y ticks.
        var tick = 0.0
        while tick <= yMax + yStep / 2 {
            let y = yPosition(tick)
            svg += "<line x1=\"\(Self.n(left))\" y1=\"\(Self.n(y))\" x2=\"\(Self.n(left + plotWidth))\" y2=\"\(Self.n(y))\" stroke=\"#e3e3e3\"/>\n"
            svg += "<text x=\"\(Self.n(left - 8))\" y=\"\(Self.n(y + 4))\" text-anchor=\"end\">\(Self.escape(formatY(tick)))</text>\n"
            tick += yStep
        }
        // Axes and X ticks.
        svg += "<line x1=\"\(Self.n(left))\" y1=\"\(Self.n(top + plotHeight))\" x2=\"\(Self.n(left + plotWidth))\" y2=\"\(Self.n(top + plotHeight))\" stroke=\"#333333\"/>\n"
        svg += "<line x1=\"\(Self.n(left))\" y1=\"\(Self.n(top))\" x2=\"\(Self.n(left))\" y2=\"\(Self.n(top + plotHeight))\" stroke=\"#333333\"/>\n"
        for x in xValues {
            let position = xPosition(x)
            svg += "<line x1=\"\(Self.n(position))\" y1=\"\(Self.n(top + plotHeight))\" x2=\"\(Self.n(position))\" y2=\"\(Self.n(top + plotHeight + 5))\" stroke=\"#333333\"/>\n"
            svg += "<text x=\"\(Self.n(position))\" y=\"\(Self.n(top + plotHeight + 20))\" text-anchor=\"middle\">\(Self.escape(Self.shortNumber(x)))</text>\n"
        }
        svg += "<text x=\"\(Self.n(left + plotWidth / 2))\" y=\"\(Self.n(height - 14))\" text-anchor=\"middle\" font-size=\"14\">\(Self.escape(xLabel))</text>\n"
        svg += "<text transform=\"translate(20 \(Self.n(top + plotHeight / 2))) rotate(-90)\" text-anchor=\"middle\" font-size=\"14\">\(Self.escape(yLabel))</text>\n"

        // Reference lines, dashed and grey, labelled at their right end.
        for reference in drawn {
            let y = yPosition(reference.y)
            svg += "<line x1=\"\(Self.n(left))\" y1=\"\(Self.n(y))\" x2=\"\(Self.n(left + plotWidth))\" y2=\"\(Self.n(y))\" stroke=\"#777777\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n"
            svg += "<text x=\"\(Self.n(left + plotWidth * 0.5))\" y=\"\(Self.n(y + 16))\" text-anchor=\"middle\" fill=\"#555555\">\(Self.escape(reference.label))</text>\n"
        }
        // The series.
        for (index, line) in series.enumerated() {
            let colour = Self.palette[(line.colour ?? index) % Self.palette.count]
            let points = line.points.sorted { $0.x < $1.x }
            let path = points.map { "\(Self.n(xPosition($0.x))),\(Self.n(yPosition($0.y)))" }.joined(separator: " ")
            svg += "<polyline fill=\"none\" \(line.stroke(index)) points=\"\(path)\"/>\n"
            for point in points {
                svg += "<circle cx=\"\(Self.n(xPosition(point.x)))\" cy=\"\(Self.n(yPosition(point.y)))\" r=\"4\" fill=\"\(colour)\">"
                    + "<title>\(Self.escape("\(line.label), \(Self.shortNumber(point.x)): \(formatY(point.y))"))</title></circle>\n"
            }
        }
        // Legend, top left inside the plot.
        let legendLines = series.count + offScale.count
        if legendLines > 0 {
            let legendWidth = 20 + 7.2 * Double((series.map(\.label) + offScale.map(\.label)).map(\.count).max() ?? 0) + 30
            svg += "<rect x=\"\(Self.n(left + 10))\" y=\"\(Self.n(top + 8))\" width=\"\(Self.n(legendWidth))\" height=\"\(Self.n(Double(legendLines) * 20 + 10))\" fill=\"#ffffff\" fill-opacity=\"0.9\" stroke=\"#cccccc\"/>\n"
            for (index, line) in series.enumerated() {
                let y = top + 8 + 18 + Double(index) * 20
                svg += "<line x1=\"\(Self.n(left + 18))\" y1=\"\(Self.n(y - 4))\" x2=\"\(Self.n(left + 42))\" y2=\"\(Self.n(y - 4))\" \(line.stroke(index))/>\n"
                svg += "<text x=\"\(Self.n(left + 50))\" y=\"\(Self.n(y))\">\(Self.escape(line.label))</text>\n"
            }
            for (index, reference) in offScale.enumerated() {
                let y = top + 8 + 18 + Double(series.count + index) * 20
                svg += "<text x=\"\(Self.n(left + 18))\" y=\"\(Self.n(y))\" fill=\"#555555\">↑ \(Self.escape(reference.label)) (off the scale)</text>\n"
            }
        }
        svg += "</svg>\n"
        return svg
    }

    /// A round top for the axis and a step giving 4 to 8 grid lines.
    package static func niceScale(_ maximum: Double) -> (top: Double, step: Double) {
        guard maximum > 0, maximum.isFinite else { return (1, 0.25) }
        let rough = maximum / 5
        let magnitude = pow(10, floor(log10(rough)))
        let step = [1.0, 2, 2.5, 5, 10].map { $0 * magnitude }.first { $0 >= rough } ?? 10 * magnitude
        return (ceil(maximum / step) * step, step)
    }

    /// 1500000 -> "1.5 M", 250000 -> "250 k", 8 -> "8".
    @Sendable package static func shortNumber(_ value: Double) -> String {
        func trimmed(_ scaled: Double, _ suffix: String) -> String {
            // Three significant digits at most: 626.72 k -> 627 k, 1.234 M -> 1.23 M.
            let decimals = abs(scaled) >= 100 ? 0 : abs(scaled) >= 10 ? 1 : 2
            var text = String(format: "%.\(decimals)f", scaled)
            guard decimals > 0 else { return text + suffix }
            while text.hasSuffix("0") { text.removeLast() }
            if text.hasSuffix(".") { text.removeLast() }
            return text + suffix
        }
        switch abs(value) {
        case 1e9...: return trimmed(value / 1e9, " G")
        case 1e6...: return trimmed(value / 1e6, " M")
        case 1e3...: return trimmed(value / 1e3, " k")
        default: return trimmed(value, "")
        }
    }

    static func escape(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// Coordinates with at most one decimal.
    static func n(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }
}

extension BenchResults {
    /// Throughput vs connections at the first payload size, one line per error rate and
    /// error wait (a colour per rate, a dash pattern per wait), with the ceiling and the PHP
    /// baseline as reference lines. HTTP/2 results: `http2Plot`.
    package func throughputPlot() -> SVGLinePlot {
        if cells.first?.wireProtocol == .h2 { return http2Plot() }
        let payload = cells.first?.payloadBytes ?? 0
        let atPayload = cells.filter { $0.payloadBytes == payload }
        let rates = Array(Set(atPayload.map(\.errorRate))).sorted()
        let waits = Array(Set(atPayload.map(\.errorWaitMilliseconds))).sorted()
        let oneWait = waits.count == 1 ? ", error wait \(BenchFormat.milliseconds(waits[0]))" : ""
        var plot = SVGLinePlot(
            title: "Salvo throughput vs connections",
            subtitle: "\(payload)-byte payload (\(atPayload.first?.frameBytes ?? 0)-byte frames)\(oneWait), median of \(settings.runsPerCell) runs; commit \(commit), \(date.prefix(10))",
            xLabel: "TLS connections (1 shard)" , yLabel: "notifications per second")
        if settings.shards != 1 { plot.xLabel = "TLS connections per shard (\(settings.shards) shards)" }
        for (waitIndex, wait) in waits.enumerated() {
            for (rateIndex, rate) in rates.enumerated() {
                let points = atPayload.filter { $0.errorRate == rate && $0.errorWaitMilliseconds == wait }
                    .map { (x: Double($0.connections), y: $0.rate.median) }
                guard !points.isEmpty else { continue }
                var label = rate == 0 ? "no errors" : "errors: " + BenchFormat.errorRate(rate)
                if waits.count > 1 { label += ", wait " + BenchFormat.milliseconds(wait) }
                plot.series.append(.init(label: label, points: points, colour: rateIndex,
                                         dashes: SVGLinePlot.dashPatterns[waitIndex % SVGLinePlot.dashPatterns.count]))
            }
        }
        if let ceiling {
            plot.references.append(.init(label: "ceiling \(SVGLinePlot.shortNumber(ceiling.median))/s (\(ceiling.frameBytes)-byte frames)", y: ceiling.median))
        }
        if let php {
            plot.references.append(.init(label: "PHP, 1 connection: \(SVGLinePlot.shortNumber(php.median))/s", y: php.median))
        }
        return plot
    }
}
