"""The app's plain data and the files it keeps: takes and the take history, voices in the library, batch lines
and their file, the text from last time, settings (QSettings, checked on reading), folders, and the guard every
reader of a user's file goes through. No widgets and no workers here: these modules import only the engine
adapter and each other (they log to the app's logger by its name), so everything above can use them."""
