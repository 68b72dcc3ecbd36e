"""Batch panel: a table of lines spoken into numbered files (several at once), with progress and retry."""

from __future__ import annotations

import codecs
import locale
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..data.batch_lines import (
    LineState,
    NotUtf8,
    Row,
    parse_pasted,
    preview,
    read_lines_file,
    read_long_text,
)
from ..data.batch_store import LINES_FILE, load_rows, rows_from, save_rows
from ..data.paths import data_dir, output_dir
from ..data.settings import MAX_GAP_MS, Settings
from ..engine_adapter import MAX_BATCH_SIZE, GenerationSettings, Voice, VoiceChoice, takes_style_instructions
from .batch_runner import BatchRunner
from .batch_table import (
    DURATION,
    INSTRUCT,
    LANGUAGE,
    OUTPUT,
    STATUS,
    TEXT,
    VOICE,
    BatchModel,
    ComboDelegate,
    StatusDelegate,
)
from .elided_label import ElidedLabel
from .language_combo import language_items
from .throttle import Throttle


class BatchPanel(QWidget):
    running_changed = Signal(bool)

    def __init__(self, ctx: AppContext, resolve_voice: Callable[[str], VoiceChoice | Callable[[], Voice]],
                 current_settings: Callable[[], GenerationSettings], parent: QWidget | None = None,
                 lines_file: Path | None = None):
        super().__init__(parent)
        self._lines_problem: str | None = None
        self.ctx = ctx
        self.resolve_voice = resolve_voice
        # a line's instruction ("" = the Studio tab's) -> what the engine gets: None where the model has no use
        # for one (set by the main window, which knows the model kind and the Studio tab)
        self.resolve_instruct: Callable[[str], str | None] = lambda _text: None
        self.current_settings = current_settings
        self.voice_names: Callable[[], list[str]] = lambda: []
        self.model = BatchModel(self)
        self.table = QTableView()
        self.table.setObjectName("BatchTable")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        head.setSectionResizeMode(TEXT, QHeaderView.ResizeMode.Stretch)
        head.setStretchLastSection(False)
        for col, width in ((0, 36), (VOICE, 130), (INSTRUCT, 180), (LANGUAGE, 100), (STATUS, 160), (DURATION, 84),
                           (OUTPUT, 250)):
            self.table.setColumnWidth(col, width)
        self.table.setItemDelegateForColumn(STATUS, StatusDelegate(self.model, self))
        self.table.setItemDelegateForColumn(
            VOICE, ComboDelegate(lambda: [("(selected voice)", "")] + [(n, n) for n in self.voice_names()], self)
        )
        self.table.setItemDelegateForColumn(
            LANGUAGE, ComboDelegate(lambda: language_items(self._languages()), self)
        )
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._update_buttons())
        self.empty_hint = QLabel(
            "No lines yet. Add a line, paste lines (Ctrl+V) or import a .txt or .csv file: each line is spoken "
            "into a numbered file of its own.\n“(selected voice)” in the Voice column means the voice selected "
            "on the Studio tab; pick another voice per line by double-clicking the cell.", self.table.viewport())
        self.empty_hint.setObjectName("Muted")
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        # the lines from last time (text, voice, language, instruction); their results are files on disk
        self.lines_file = lines_file or data_dir() / LINES_FILE
        self._save_lines_soon = Throttle(1000, self.save_lines, self)  # edits come in bursts (typing, pasting)
        self._saved_rows: list[Row] | None = self._stored_rows()
        self.model.add(self._saved_rows)
        for signal in (self.model.rowsInserted, self.model.rowsRemoved, self.model.rowsMoved,
                       self.model.dataChanged, self.model.modelReset):
            signal.connect(self._remember_lines)
        self.model.rowsInserted.connect(lambda *_: self._update_buttons())
        self.model.rowsRemoved.connect(lambda *_: self._update_buttons())
        self.model.dataChanged.connect(lambda *_: self._update_buttons())
        QShortcut(QKeySequence.StandardKey.Paste, self.table).activated.connect(self.paste_lines)
        QShortcut(QKeySequence.StandardKey.Delete, self.table).activated.connect(self.remove_selected)

        self.add_btn = QPushButton("Add line")
        self.add_btn.clicked.connect(self.add_line)
        self.paste_btn = QPushButton("Paste lines")
        self.paste_btn.setToolTip("One line of text per row (Ctrl+V in the table)")
        self.paste_btn.clicked.connect(self.paste_lines)
        self.import_btn = QPushButton("Import .txt / .csv…")
        self.import_btn.clicked.connect(self.import_file)
        self.up_btn = QPushButton("▲")
        self.up_btn.setToolTip("Move up")
        self.up_btn.clicked.connect(lambda: self.move_selected(-1))
        self.down_btn = QPushButton("▼")
        self.down_btn.setToolTip("Move down")
        self.down_btn.clicked.connect(lambda: self.move_selected(1))
        self.remove_btn = QPushButton("Remove")
        self.remove_btn.clicked.connect(self.remove_selected)
        tools = QHBoxLayout()
        for b in (self.add_btn, self.paste_btn, self.import_btn):
            tools.addWidget(b)
        tools.addStretch(1)
        for b in (self.up_btn, self.down_btn, self.remove_btn):
            tools.addWidget(b)

        self.folder_label = ElidedLabel()  # a long path ends in "…" (full path in its tooltip)
        self.folder_label.setObjectName("PathLabel")
        self.folder_btn = QPushButton("Choose…")
        self.folder_btn.clicked.connect(self.choose_folder)
        self.merge = QCheckBox("Also write one merged file, gap")
        self.merge.setChecked(ctx.settings.batch_merge)
        self.merge.toggled.connect(lambda on: setattr(ctx.settings, "batch_merge", on))
        self.gap = QSpinBox(minimum=0, maximum=MAX_GAP_MS, singleStep=100, suffix=" ms")
        self.gap.setValue(ctx.settings.batch_gap_ms)
        self.gap.valueChanged.connect(lambda v: setattr(ctx.settings, "batch_gap_ms", v))
        out_row = QHBoxLayout()
        out_row.addWidget(QLabel("Output folder"))
        out_row.addWidget(self.folder_label, 1)
        out_row.addWidget(self.folder_btn)
        # the options on a row of their own: beside the folder they were cut off below about 1100 px
        options_row = QHBoxLayout()
        options_row.addWidget(self.merge)
        options_row.addWidget(self.gap)
        self.at_once = QSpinBox(minimum=0, maximum=MAX_BATCH_SIZE)
        self.at_once.setSpecialValueText("Auto")  # 0: the model's suggested_batch_size
        self.at_once.setValue(ctx.settings.batch_size)
        self.at_once.setToolTip("Lines generated side by side. On q8 models more is faster overall, each line a "
                                "little slower; fp32/fp16 models run lines in turn, so 1 gives the first line "
                                "soonest. Auto picks for the model. The results are the same for any value.")
        self.at_once.valueChanged.connect(lambda v: setattr(ctx.settings, "batch_size", v))
        options_row.addSpacing(16)
        options_row.addWidget(QLabel("Lines at once"))
        options_row.addWidget(self.at_once)
        options_row.addStretch(1)

        self.progress = QProgressBar()
        self.progress.setFormat("")
        self.progress.setValue(0)
        self.runner = BatchRunner(ctx, self.model, self.table, self.progress, self)
        self.runner.running_changed.connect(self.running_changed)
        self.runner.running_changed.connect(lambda running: None if running else self._update_buttons())
        self.run_btn = QPushButton("Run all")
        self.run_btn.setObjectName("PrimaryButton")
        self.run_btn.clicked.connect(self.run_all)
        self.retry_btn = QPushButton("Retry failed")
        self.retry_btn.setToolTip("Run again the lines that failed, were cancelled or were edited")
        self.retry_btn.clicked.connect(self.retry_failed)
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.clicked.connect(self.cancel)
        run_row = QHBoxLayout()
        run_row.addWidget(self.progress, 1)
        run_row.addWidget(self.run_btn)
        run_row.addWidget(self.retry_btn)
        run_row.addWidget(self.cancel_btn)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 12, 12, 12)
        lay.setSpacing(8)
        lay.addLayout(tools)
        lay.addWidget(self.table, 1)
        lay.addLayout(out_row)
        lay.addLayout(options_row)
        lay.addLayout(run_row)

        ctx.busy_changed.connect(lambda _: self._update_buttons())
        ctx.model_changed.connect(self._update_buttons)
        self.model.voice_known = self._voice_known  # an unknown voice is marked as soon as its line is there
        for signal in (ctx.voices_changed, ctx.model_changed):
            signal.connect(self.model.voices_changed)
        self._show_folder()
        self._update_buttons()

    def _stored_rows(self) -> list[Row]:
        rows, problem = load_rows(self.lines_file)
        if problem:
            self.ctx.notices.append(("The batch lines could not be read", problem))
        older = self.ctx.settings.batch_lines  # where lines were kept before they had a file of their own
        if older and not rows and problem is None and not self.lines_file.exists():
            rows = rows_from(older)
            if save_rows(self.lines_file, rows) is None:
                self.ctx.settings.qsettings.remove(Settings.batch_lines.key)
        return rows

    def _remember_lines(self, *_) -> None:
        self._save_lines_soon.ping()
        self._place_hint()

    def save_lines(self) -> None:
        """Write the table's lines now (the app calls this when it closes; edits write within a second)."""
        self._save_lines_soon.stop()
        rows = [(line.text, line.voice, line.language, line.instruct) for line in self.model.lines]
        if rows == self._saved_rows:  # progress and states change the table too: only the lines are kept
            return
        problem = save_rows(self.lines_file, rows)
        self._saved_rows = rows if problem is None else None
        if problem and problem != self._lines_problem:  # said once, not at every edit
            self.ctx.dialogs.notice(self, "The batch lines were not saved", problem)
        self._lines_problem = problem

    def _place_hint(self) -> None:
        self.empty_hint.setVisible(self.model.rowCount() == 0)
        self.empty_hint.setGeometry(self.table.viewport().rect().adjusted(24, 12, -24, -12))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place_hint()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self._place_hint()

    # --- editing -----------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.runner.worker is not None

    def instructable(self) -> bool:
        """Whether the loaded model follows style instructions (CustomVoice 1.7B): the Instruction column shows."""
        return takes_style_instructions(self.ctx.synth)

    def _languages(self) -> list[str]:
        return self.ctx.synth.languages if self.ctx.synth is not None else ["auto"]

    def _selected_rows(self) -> list[int]:
        return sorted({i.row() for i in self.table.selectionModel().selectedRows()})

    def add_line(self) -> None:
        self.model.add([("New line: type the text here", "", "auto")])
        row = self.model.rowCount() - 1
        self.table.selectRow(row)
        self.table.edit(self.model.index(row, TEXT))

    def add_rows(self, rows: list[Row] | list[tuple[str, str, str]]) -> None:
        self.model.add(rows)

    def paste_lines(self) -> None:
        if self.running:
            return
        rows = parse_pasted(QGuiApplication.clipboard().text())
        if not rows:
            self.ctx.dialogs.info(self, "Nothing to paste", "The clipboard has no text; copy some lines first.")
            return
        self.model.add(rows)

    def import_file(self) -> None:
        path = self.ctx.dialogs.open_file(self, "Import lines", str(Path.home()),
                                          "Text or CSV (*.txt *.csv);;All files (*)")
        if path:
            self.import_path(Path(path))

    def import_path(self, path: Path) -> bool:
        try:
            encoding = None
            try:
                rows = read_lines_file(path)
            except NotUtf8 as e:
                encoding = self._ask_encoding(path, str(e))
                if encoding is None:
                    return False
                rows = read_lines_file(path, encoding)
            if path.suffix.lower() == ".txt" and len(rows) > 1:
                # one line per row is the usual case: the default button (Enter)
                choice = self.ctx.dialogs.choose(
                    self, "Import text",
                    f"Is {path.name} one long text, or {len(rows)} separate lines?\n\nSeparate lines: each line "
                    "becomes an item of its own, saved as a file of its own.\nOne long text: one item, spoken in "
                    "chunks of whole sentences with natural pauses and saved as one file.",
                    [f"{len(rows)} separate lines", "One long text"])
                if choice is None:
                    return False
                if choice == 1:
                    rows = [read_long_text(path, encoding)]
        except ValueError as e:
            self.ctx.dialogs.error(self, "Cannot import", str(e))
            return False
        self.model.add(rows)
        return True

    def _ask_encoding(self, path: Path, why: str) -> str | None:
        """A file that is not UTF-8: its first lines as Windows-1252 (Latin-1 and the Windows additions, what
        such files mostly are) and, where it differs, the system's own 8-bit encoding; the user picks one, or
        Cancel. None: cancelled."""
        offered = [("Western European (Windows-1252, Latin-1)", "cp1252")]
        system = locale.getpreferredencoding(False)
        if codecs.lookup(system).name not in ("utf-8", "cp1252", "latin-1", "iso8859-1", "ascii"):
            offered.append((f"the system's encoding ({system})", system))
        shown = "\n\n".join(f"As {label}:\n{preview(path, encoding)}" for label, encoding in offered)
        choice = self.ctx.dialogs.choose(
            self, "Not UTF-8", f"{why}.\n\nIt can be read as an older encoding; check that the letters look right:"
            f"\n\n{shown}", [f"Read as {label.split(' (')[0]}" if len(offered) > 1 else "Read it so"
                                for label, _encoding in offered])
        return None if choice is None else offered[choice][1]

    def move_selected(self, delta: int) -> None:
        rows = self._selected_rows()
        if len(rows) == 1 and not self.running:
            self.table.selectRow(self.model.move(rows[0], delta))

    def remove_selected(self) -> None:
        if not self.running:
            self.model.remove(self._selected_rows())

    # --- output folder -----------------------------------------------------------------------------------
    def folder(self) -> Path:
        return Path(self.ctx.settings.batch_dir) if self.ctx.settings.batch_dir else output_dir() / "Batch"

    def _show_folder(self) -> None:
        self.folder_label.setText(str(self.folder()))
        self.folder_label.setToolTip(str(self.folder()))

    def choose_folder(self) -> None:
        folder = self.ctx.dialogs.open_dir(self, "Folder for the batch files", str(self.folder()))
        if folder:
            self.ctx.settings.batch_dir = folder
            self._show_folder()

    def _voice_known(self, name: str) -> bool:
        """A voice in the library (its exact name) or a speaker of the model (any case), as the run resolves it."""
        names = self.voice_names()
        return name in names or name.lower() in names

    # --- running -----------------------------------------------------------------------------------------
    def run_all(self) -> bool:
        """Every line; when some are finished already, ask whether to make those again."""
        lines = self.model.lines
        unfinished = [line.key for line in lines if line.state != LineState.DONE]
        if len(unfinished) < len(lines) and not self.running:
            done = len(lines) - len(unfinished)
            choices = (["Run the unfinished ones", "Run all again"] if unfinished else ["Run all again"])
            choice = self.ctx.dialogs.choose(
                self, "Run all", f"{done} of {len(lines)} lines are finished already. Run only the "
                f"{len(unfinished)} unfinished ones, or all lines again (their files are made again)?" if unfinished
                else f"All {len(lines)} lines are finished already. Run them all again (their files are made again)?",
                choices)
            if choice is None:
                return False
            if choices[choice] == "Run the unfinished ones":
                return self.start(unfinished)
        return self.start([line.key for line in lines])

    def retry_failed(self) -> bool:
        # also lines edited since (they are "ready" again): fixing a failed line and retrying should run it
        return self.start([line.key for line in self.model.lines if line.state != LineState.DONE])

    def start(self, keys: list[int]) -> bool:
        if not keys or self.running or not self.ctx.can_start(self):
            return False
        folder = self.folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.ctx.dialogs.error(self, "Cannot use the folder", f"{folder}: {e.strerror}")
            return False
        return self.runner.start(keys, folder, self.merge.isChecked(), self.gap.value() / 1000,
                                 self.at_once.value() or None, self.resolve_voice, self.resolve_instruct,
                                 self.current_settings)

    def cancel(self) -> None:
        self.runner.cancel()

    def _update_buttons(self) -> None:
        # the Instruction column only where the model follows style instructions (CustomVoice 1.7B)
        self.table.setColumnHidden(INSTRUCT, not (self.ctx.synth is not None and self.instructable()))
        running = self.running
        has_rows = self.model.rowCount() > 0
        selected = bool(self._selected_rows())
        for b in (self.add_btn, self.paste_btn, self.import_btn, self.folder_btn, self.at_once):
            b.setEnabled(not running)
        for b in (self.up_btn, self.down_btn, self.remove_btn):
            b.setEnabled(selected and not running)
        can_run = has_rows and not running and self.ctx.synth is not None and not self.ctx.busy
        self.run_btn.setEnabled(can_run)
        states = {ln.state for ln in self.model.lines}
        self.retry_btn.setEnabled(can_run and bool(states & {LineState.FAILED, LineState.CANCELLED}
                                                   or (LineState.DONE in states and LineState.READY in states)))
        self.cancel_btn.setEnabled(running)


