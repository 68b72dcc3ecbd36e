; Inno Setup script for Qwen3-TTS Studio (Windows). Build on Windows:
;   1. python packaging\build.py --no-deb --no-tar     (PyInstaller onedir in dist\qwen3tts-studio)
;   2. iscc /DAppVersion=0.1.0 packaging\windows\qwen3tts-studio.iss
; Output: dist\qwen3tts-studio-<version>-setup.exe. Models, voices and settings live in the user's
; AppData folders and are not removed on uninstall.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "Qwen3-TTS Studio"
#define AppExe "qwen3tts-studio.exe"

[Setup]
AppId={{6C0F3A1E-7B2D-4E55-9C61-3A8E5D2B9F10}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=Qwen3-TTS Studio developers
DefaultDirName={autopf}\Qwen3-TTS Studio
DefaultGroupName={#AppName}
OutputDir=..\..\dist
OutputBaseFilename=qwen3tts-studio-{#AppVersion}-setup
SetupIconFile=..\..\build\icons\icon.ico
UninstallDisplayIcon={app}\{#AppExe}
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
PrivilegesRequiredOverridesAllowed=dialog

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
Source: "..\..\dist\qwen3tts-studio\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{group}\{#AppName}"; Filename: "{app}\{#AppExe}"
Name: "{group}\Uninstall {#AppName}"; Filename: "{uninstallexe}"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#AppExe}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#AppExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent
