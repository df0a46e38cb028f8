// The seed's SampleHandler (WWDC 2017 "Developing Broadcast Extensions", slides 003), written as
// iOS code: on iOS these imports are ReplayKit, CoreMedia and VideoToolbox; here one import,
// OpenReplayKit, gives the same names. `BroadcastSession` and `KeychainAccess` are the service
// developer's own code in the talk (BroadcastSession.swift here); the talk's
// `VTCompressionSessionEncodeFrame` call becomes the session's `encode`, which notes the picture.
import OpenReplayKit

class SampleHandler: RPBroadcastSampleHandler {
    var session: BroadcastSession

    // Override init to read login credentials from shared keychain
    // (the talk's `override func init()`: RPBroadcastExtensionMain makes the handler with it)
    override init() {
        session = BroadcastSession.instance
        super.init()
        let credentials = KeychainAccess.getLoginCredentials()
        session.authentificate(credentials)
        SampleHandlerBox.handler = self
        // Not the talk's: a statistics timer on the main run loop and work on the main queue, as
        // real services' handlers start them in init (the tests check that both run here).
        session.startStatistics()
    }

    // Override broadcastStarted to prepare to receive media samples
    override func broadcastStarted(withSetupInfo setupInfo: [String : NSObject]?) {
        // Verify user is logged in and there’s network connectivity
        if (session.userLoggedIn(setupInfo)) {
            session.createMediaEngine()
        } else {
            let userInfo = [NSLocalizedFailureReasonErrorKey : "Not Logged In"]
            let error = NSError(domain: "RPBroadcastErrorDomain", code: 401, userInfo: userInfo)
            finishBroadcastWithError(error)
        }
    }

    // Both audio and video samples are handled by processSampleBuffer routine
    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer,
        with sampleBufferType: RPSampleBufferType) {

        switch sampleBufferType {
        case RPSampleBufferType.video:
            let imageBuffer:CVImageBuffer = CMSampleBufferGetImageBuffer(sampleBuffer)!
            let pts = CMSampleBufferGetPresentationTimeStamp(sampleBuffer) as CMTime
            session.encode(imageBuffer, pts)
            break
        case RPSampleBufferType.audioApp:
            // Handle audio sample buffer for app audio
            session.audio("app", sampleBuffer)
            break
        case RPSampleBufferType.audioMic:
            // Handle audio sample buffer for mic audio
            session.audio("mic", sampleBuffer)
            break
        }
    }

    // Use application details to help users find your broadcast
    override func broadcastAnnotated(withApplicationInfo applicationInfo: [AnyHashable : Any]) {
        let bundleIdentifier = applicationInfo[RPApplicationInfoBundleIdentifierKey]
        if (bundleIdentifier != nil) {
            session.addMetadataWithApplicationInfo(bundleIdentifier)
        }
    }

    override func broadcastPaused() { session.note("paused") }
    override func broadcastResumed() { session.note("resumed") }
    override func broadcastFinished() { session.note("finished") }
}

/// The `[String : NSObject]` spelling of the annotation (the talk's template shows it).
class TemplateSampleHandler: RPBroadcastSampleHandler {
    // User has requested to start the broadcast
    override func broadcastStarted(withSetupInfo setupInfo: [String : NSObject]?) {}
    // User has requested to finish the broadcast
    override func broadcastFinished() {}
    // Handle the sample buffer here
    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer,
    with sampleBufferType: RPSampleBufferType) {}
    // Use details of application to annotate the broadcast
    override func broadcastAnnotated(withApplicationInfo info: [String : NSObject]) {}
}
