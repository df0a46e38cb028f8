// On iOS, `import ReplayKit` brings UIKit and with it Foundation and Dispatch: handlers written
// there use NSObject, NSError, URL, DispatchQueue, Timer, UserDefaults, CGRect with no other import.
// Re-exported so that the same files compile here with only `import OpenReplayKit` (docs/PORTING.md).
@_exported public import Foundation
@_exported public import Dispatch
