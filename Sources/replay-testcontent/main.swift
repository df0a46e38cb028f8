// replay-testcontent: known, moving test content for an X display and a PulseAudio server.
// See TestContentCommand for what it draws and plays.
TestContentCommand.main()
