package dev.fencelock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads {@code libfencelock_jni}: from {@code java.library.path} if it is there, else the copy bundled in the jar
 * under {@code native/<os>-<arch>/}, extracted once per process to a temporary file.
 */
final class NativeLoader {
    static final String LIBRARY = "fencelock_jni";

    private NativeLoader() {}

    static synchronized void load() {
        try {
            System.loadLibrary(LIBRARY);
            return;
        } catch (UnsatisfiedLinkError notOnPath) {
            // Fall through to the bundled copy.
        }
        String resource = "/native/" + classifier() + "/" + System.mapLibraryName(LIBRARY);
        try (InputStream in = NativeLoader.class.getResourceAsStream(resource)) {
            if (in == null) {
                throw new UnsatisfiedLinkError("fencelock: no " + System.mapLibraryName(LIBRARY) + " on java.library.path ("
                        + System.getProperty("java.library.path") + ") and none bundled for " + classifier()
                        + " (this jar has native libraries for linux-x86_64 only)");
            }
            Path dir = Files.createTempDirectory("fencelock-jni");
            Path lib = dir.resolve(System.mapLibraryName(LIBRARY));
            Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            lib.toFile().deleteOnExit();
            dir.toFile().deleteOnExit();
            System.load(lib.toAbsolutePath().toString());
        } catch (IOException e) {
            throw new UnsatisfiedLinkError("fencelock: could not extract the bundled native library: " + e);
        }
    }

    /** {@code linux-x86_64}, {@code linux-aarch64}, …: the jar's folder for this platform. */
    static String classifier() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (os.startsWith("linux")) {
            os = "linux";
        } else if (os.startsWith("mac")) {
            os = "macos";
        } else if (os.startsWith("windows")) {
            os = "windows";
        }
        if (arch.equals("amd64") || arch.equals("x86_64")) {
            arch = "x86_64";
        } else if (arch.equals("arm64")) {
            arch = "aarch64";
        }
        return os + "-" + arch;
    }
}
