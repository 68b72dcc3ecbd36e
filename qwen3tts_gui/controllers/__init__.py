"""Controllers: plain QObjects that carry out what the user asked for (open or make a model, generate, keep the
takes) over the app context, the engine adapter and the workers, and report through signals. They build no
layout; the main window builds the widgets and wires them to these. Nothing here imports main_window."""
