//! A container engine and an image for the container sandbox's tests (built with the
//! `container` feature): `podman` (or `docker`) on `PATH`, and an image imported from the
//! host's static BusyBox, so no registry is needed. A machine without them fails, naming what
//! to install.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The image the tests run their containers from.
pub const IMAGE: &str = "localhost/noeta-test-busybox:2";

/// The engine the tests use: `podman`, else `docker`; a machine without one fails here.
pub fn engine() -> &'static str {
    static ENGINE: OnceLock<&'static str> = OnceLock::new();
    ENGINE.get_or_init(|| {
        for name in ["podman", "docker"] {
            if Command::new(name)
                .arg("version")
                .output()
                .is_ok_and(|o| o.status.success())
            {
                return name;
            }
        }
        panic!(
            "the container sandbox tests need a working container engine: apt-get install \
             podman (or run a Docker daemon)"
        )
    })
}

/// Runs the engine with `args` to its end.
pub fn engine_out(args: &[&str]) -> std::process::Output {
    Command::new(engine())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", engine()))
}

/// The test image, imported once from a root file system holding only BusyBox (and a
/// `bash` that is BusyBox's shell).
pub fn image() -> &'static str {
    static MADE: OnceLock<()> = OnceLock::new();
    MADE.get_or_init(|| {
        if engine_out(&["image", "inspect", IMAGE]).status.success() {
            return;
        }
        let busybox = Path::new("/bin/busybox");
        assert!(
            busybox.is_file(),
            "the container sandbox tests build their image from a static BusyBox: apt-get \
             install busybox-static"
        );
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for dir in ["bin", "tmp", "etc", "root"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::copy(busybox, root.path().join("bin/busybox")).unwrap_or_else(|e| panic!("{e}"));
        let list = Command::new(busybox)
            .arg("--list")
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            let link = root.path().join("bin").join(applet);
            if !link.exists() {
                std::os::unix::fs::symlink("busybox", link).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        std::fs::write(
            root.path().join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // The Bash tool runs `bash`; BusyBox's shell stands in for it.
        let bash = root.path().join("bin/bash");
        std::fs::write(&bash, "#!/bin/ash\nexec /bin/ash \"$@\"\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let mut mode = std::fs::metadata(&bash)
            .unwrap_or_else(|e| panic!("{e}"))
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut mode, 0o755);
        std::fs::set_permissions(&bash, mode).unwrap_or_else(|e| panic!("{e}"));
        let tar = root.path().with_extension("tar");
        let made = Command::new("tar")
            .arg("-C")
            .arg(root.path())
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap_or_else(|e| panic!("tar: {e}"));
        assert!(made.success());
        let imported = engine_out(&["import", &tar.display().to_string(), IMAGE]);
        let _ = std::fs::remove_file(&tar);
        assert!(
            imported.status.success(),
            "{} import: {}",
            engine(),
            String::from_utf8_lossy(&imported.stderr)
        );
    });
    IMAGE
}
