import Testing
@testable import ReplayCapture

/// The pure rules behind the privacy captures: which windows are OpenReplayKit's own, what of a
/// protected window is blanked, and which pixels of a new pixmap are a window's own.
@Suite("Privacy rules")
struct PrivacyRulesTests {
    @Test func openReplayKitsOwnWindowsAreKnownByTheirClass() {
        for ours in ["openreplaykit-consent", "openreplaykit-preview", "openreplaykit-picker", "replayd-indicator"] {
            #expect(WindowCensus.isSystemUI(instance: ours), "\(ours)")
        }
        for theirs in ["", "openreplaykit", "replayd-indicator2", "firefox", "OpenReplayKit-consent"] {
            #expect(!WindowCensus.isSystemUI(instance: theirs), "\(theirs)")
        }
    }

    @Test func subtractingLeavesWhatIsNotCovered() {
        let rect = PixelRect(x: 0, y: 0, width: 100, height: 50)
        #expect(rect.subtracting(PixelRect(x: 200, y: 0, width: 10, height: 10)) == [rect])
        #expect(rect.subtracting(PixelRect(x: -10, y: -10, width: 200, height: 200)).isEmpty)
        let pieces = rect.subtracting(PixelRect(x: 40, y: 10, width: 20, height: 20))
        #expect(pieces.reduce(0) { $0 + $1.area } == 100 * 50 - 20 * 20)
        for (i, a) in pieces.enumerated() {
            for b in pieces[(i + 1)...] { #expect(a.intersection(b).isEmpty, "\(a) and \(b) overlap") }
        }
    }

    static func window(_ id: UInt32, _ rect: PixelRect, protected: Bool = false, ours: Bool = false, depth: UInt8 = 24) -> TopLevelWindow {
        TopLevelWindow(frame: id, client: id, outer: rect, clientRect: rect, clientDepth: depth, clientBorder: 0, pid: 1,
                       isProtected: protected, isSystemUI: ours, shape: protected ? [rect] : [])
    }

    @Test func aProtectedWindowIsBlankedExceptWhereAnOpaqueWindowAboveCoversIt() {
        let secret = PixelRect(x: 0, y: 0, width: 100, height: 100)
        let above = PixelRect(x: 50, y: 0, width: 100, height: 100)
        let below = PixelRect(x: 0, y: 0, width: 300, height: 300)
        // Bottom to top: a window below (irrelevant), the protected one, an opaque one above.
        let areas = ScreenCapture.blankedAreas([Self.window(1, below), Self.window(2, secret, protected: true), Self.window(3, above)])
        #expect(areas.reduce(0) { $0 + $1.area } == 50 * 100, "only the uncovered half: \(areas)")
        #expect(areas.allSatisfy { secret.contains($0) && $0.intersection(above).isEmpty })
        // A see-through (32-bit) window or one of ours above covers nothing: all of it is blanked.
        for top in [Self.window(3, above, depth: 32), Self.window(3, above, ours: true)] {
            let all = ScreenCapture.blankedAreas([Self.window(2, secret, protected: true), top])
            #expect(all.reduce(0) { $0 + $1.area } == 100 * 100)
        }
        #expect(ScreenCapture.blankedAreas([Self.window(1, secret)]).isEmpty, "nothing protected, nothing blanked")
    }

    @Test func aNewPixmapIsTheWindowsOwnOnlyWhereItDrew() {
        var mask = CleanMask(width: 10, height: 4)
        #expect(!mask.isClean(x: 0, y: 0) && !mask.isAllClean)
        mask.mark(PixelRect(x: 0, y: 0, width: 5, height: 4))
        #expect(mask.isClean(x: 4, y: 3) && !mask.isClean(x: 5, y: 0) && !mask.isAllClean)
        mask.mark(PixelRect(x: 3, y: -2, width: 20, height: 20))   // clipped, overlapping
        #expect(mask.isAllClean)
        #expect(!mask.isClean(x: 10, y: 0) && !mask.isClean(x: -1, y: 0), "outside is never clean")
    }
}
