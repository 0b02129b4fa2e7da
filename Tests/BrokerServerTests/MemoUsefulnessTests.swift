@testable import BrokerServer
import XCTest

/// When a connection's memo of answers is consulted: always while it serves a line for every `keptPerServed` it keeps;
/// otherwise one line in `probeInterval`, the interval doubling with each trial a probe starts and that fails again.
final class MemoUsefulnessTests: XCTestCase {
    /// Lines consulted out of `lines`; each consulted line is served when `serve(n)` says so for the n-th consulted
    /// line, else its answer is kept (a cache hit).
    private func consulted(_ lines: Int, by usefulness: inout MemoUsefulness, serve: (Int) -> Bool = { _ in false }) -> Int {
        var count = 0
        for _ in 0..<lines where usefulness.consultsNextLine() {
            if serve(count) { usefulness.served() } else { usefulness.kept() }
            count += 1
        }
        return count
    }

    func testAMemoThatServesALineInThreeIsAlwaysConsulted() {
        var usefulness = MemoUsefulness()
        let lines = 20 * MemoUsefulness.trialLines
        XCTAssertEqual(consulted(lines, by: &usefulness, serve: { $0 % 3 == 0 }), lines)
        XCTAssertTrue(usefulness.consultsNextLine())
    }

    func testAMemoThatServesNothingIsConsultedForOneLineInSixteen() {
        var usefulness = MemoUsefulness()
        XCTAssertEqual(consulted(MemoUsefulness.trialLines, by: &usefulness), MemoUsefulness.trialLines)
        XCTAssertFalse(usefulness.consultsNextLine(), "the line after two fillings served from neither")
        let lines = 100 * MemoUsefulness.firstProbeInterval
        let probes = consulted(lines - 1, by: &usefulness)  // the line above was the first of these
        XCTAssertEqual(probes, lines / MemoUsefulness.firstProbeInterval)
    }

    func testAMemoServingByChanceIsGivenUp() {
        // Random requests over thousands of tokens: the memo serves one line in a hundred.
        var usefulness = MemoUsefulness()
        XCTAssertEqual(consulted(MemoUsefulness.trialLines + 1, by: &usefulness, serve: { $0 % 100 == 99 }),
                       MemoUsefulness.trialLines + 1)
        XCTAssertFalse(usefulness.consultsNextLine())
    }

    func testAProbeServedStartsATrialAndEachFailedTrialHalvesTheProbes() {
        var usefulness = MemoUsefulness()
        _ = consulted(MemoUsefulness.trialLines, by: &usefulness)
        var interval = MemoUsefulness.firstProbeInterval
        XCTAssertEqual(usefulness.probeInterval, interval)
        for _ in 0..<8 {
            usefulness.served()  // a probe's answer, or the answer kept last, served a repeat
            XCTAssertEqual(consulted(MemoUsefulness.probeTrialLines, by: &usefulness), MemoUsefulness.probeTrialLines,
                           "a trial consults every line")
            interval = min(2 * interval, MemoUsefulness.longestProbeInterval)
            XCTAssertEqual(usefulness.probeInterval, interval)
            XCTAssertEqual(consulted(10 * interval, by: &usefulness), 10, "one line in \(interval)")
        }
        XCTAssertEqual(interval, MemoUsefulness.longestProbeInterval)
    }

    func testATrialThatSucceedsMakesProbesFrequentAgain() {
        var usefulness = MemoUsefulness()
        _ = consulted(MemoUsefulness.trialLines, by: &usefulness)
        usefulness.served()
        for _ in 0..<2 {
            _ = consulted(MemoUsefulness.probeTrialLines, by: &usefulness)
            usefulness.served()
        }
        XCTAssertEqual(usefulness.probeInterval, 8 * MemoUsefulness.firstProbeInterval)
        // The app repeats itself again: half its lines are served.
        _ = consulted(2 * MemoUsefulness.probeTrialLines, by: &usefulness, serve: { $0 % 2 == 0 })
        XCTAssertEqual(usefulness.probeInterval, MemoUsefulness.firstProbeInterval)
        XCTAssertTrue(usefulness.consultsNextLine())
    }

    func testLinesThatAreNotHitsDoNotCountAgainstTheMemo() {
        var usefulness = MemoUsefulness()
        // Consulted, but nothing kept (an error, a miss that went to a task): the memo was not shown useless.
        for line in 0..<10 * MemoUsefulness.trialLines { XCTAssertTrue(usefulness.consultsNextLine(), "line \(line)") }
    }
}
