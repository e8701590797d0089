package zkd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.Set;

/**
 * The checks that keep the extracted zkd binary out of other local users' reach: folders and
 * files are looked at without following symbolic links (one {@code lstat} each, through the
 * {@code unix} attribute view, which unlike {@code PosixFilePermission} shows the sticky bit),
 * and a folder is trusted only when no other user can add, rename or replace what it holds.
 */
final class PrivateFolders {
    private static final int TYPE = 0170000;
    private static final int DIRECTORY = 0040000;
    private static final int REGULAR = 0100000;
    private static final int LINK = 0120000;
    private static final int STICKY = 01000;
    private static final int GROUP_OR_OTHERS_WRITE = 0022;
    private static final int GROUP_OR_OTHERS_ANY = 0077;
    private static final int OWNER_EXECUTE = 0100;
    private static final int MAX_LINKS = 40;
    private static final FileAttribute<Set<PosixFilePermission>> OWNER_ONLY =
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"));

    /** Why a folder or file is not used: another user could change it. */
    static final class UnsafeException extends IOException {
        private static final long serialVersionUID = 1L;

        UnsafeException(String message) {
            super(message);
        }
    }

    private final int uid;

    private PrivateFolders(int uid) {
        this.uid = uid;
    }

    /** The checks for this process's effective user (Linux: {@code /proc/self/status}). */
    static PrivateFolders forThisProcess() throws IOException {
        for (String line : Files.readAllLines(Paths.get("/proc/self/status"), StandardCharsets.UTF_8)) {
            if (line.startsWith("Uid:")) {
                String[] ids = line.substring(4).trim().split("\\s+");
                if (ids.length >= 2) {
                    try {
                        return new PrivateFolders(Integer.parseInt(ids[1]));
                    } catch (NumberFormatException e) {
                        break;
                    }
                }
            }
        }
        throw new IOException("/proc/self/status names no effective user id");
    }

    /**
     * {@code path} as a folder no other user can change, made (mode 0700) where missing: every
     * folder from {@code /} down is owned by this user or root, and none but a sticky one (as
     * {@code /tmp}) is writable by group or others. A symbolic link on the way is followed only
     * when this user or root owns it (its folder having passed already), and the folders it
     * leads to are checked the same way from {@code /}.
     *
     * @return the path with every link resolved
     * @throws UnsafeException naming the first folder another user could change
     */
    Path trustedFolder(Path path) throws IOException {
        return walk(path.toAbsolutePath().normalize(), 0);
    }

    private Path walk(Path path, int links) throws IOException {
        Path at = path.getRoot();
        checkOnTheWay(at, stat(at));
        for (Path name : path) {
            Path next = at.resolve(name);
            Map<String, Object> attrs = statIfExists(next);
            if (attrs == null) {
                at = ownFolder(at, name.toString());
                continue;
            }
            if ((mode(attrs) & TYPE) == LINK) {
                int owner = owner(attrs);
                if (owner != uid && owner != 0) {
                    throw new UnsafeException(next + " is a symbolic link owned by user id " + owner);
                }
                if (links >= MAX_LINKS) {
                    throw new UnsafeException(next + " leads through more than " + MAX_LINKS + " symbolic links");
                }
                at = walk(next.toRealPath(), links + 1);
                continue;
            }
            checkOnTheWay(next, attrs);
            at = next;
        }
        return at;
    }

    private void checkOnTheWay(Path dir, Map<String, Object> attrs) throws UnsafeException {
        int mode = mode(attrs);
        int owner = owner(attrs);
        if ((mode & TYPE) != DIRECTORY) {
            throw new UnsafeException(dir + " is not a folder");
        }
        if (owner != uid && owner != 0) {
            throw new UnsafeException(dir + " is owned by user id " + owner + ", not by this user (" + uid + ") or root");
        }
        if ((mode & GROUP_OR_OTHERS_WRITE) != 0 && (mode & STICKY) == 0) {
            throw new UnsafeException(dir + " has mode " + octal(mode) + ": group or others may write it");
        }
    }

    /**
     * The folder {@code name} in the trusted folder {@code parent}, made with mode 0700 if
     * missing, and checked after: a folder (not a link) this user owns, writable by no one else.
     *
     * @throws UnsafeException when it is a link, or another user's, or writable by others
     */
    Path ownFolder(Path parent, String name) throws IOException {
        Path dir = parent.resolve(name);
        try {
            Files.createDirectory(dir, OWNER_ONLY);
        } catch (FileAlreadyExistsException e) {
            // Made before, by this user or another (checked next), or a link (never followed).
        }
        checkOwn(dir, stat(dir), DIRECTORY, GROUP_OR_OTHERS_WRITE);
        return dir;
    }

    /** A new, empty folder in the trusted folder {@code parent}, this user's alone (0700). */
    Path freshFolder(Path parent, String prefix) throws IOException {
        Path dir = Files.createTempDirectory(parent, prefix, OWNER_ONLY);
        checkOwn(dir, stat(dir), DIRECTORY, GROUP_OR_OTHERS_ANY);
        return dir;
    }

    /** Checks that {@code file} is a regular file (not a link) this user owns and no one else may write. */
    void checkOwnFile(Path file) throws IOException {
        checkOwn(file, stat(file), REGULAR, GROUP_OR_OTHERS_WRITE);
    }

    /** Whether {@code file} is a regular file (not a link) this user owns, may run, and no one else may write. */
    boolean isOwnExecutable(Path file) throws IOException {
        Map<String, Object> attrs = statIfExists(file);
        if (attrs == null) {
            return false;
        }
        int mode = mode(attrs);
        return (mode & TYPE) == REGULAR && owner(attrs) == uid && (mode & GROUP_OR_OTHERS_WRITE) == 0
                && (mode & OWNER_EXECUTE) != 0;
    }

    private void checkOwn(Path p, Map<String, Object> attrs, int type, int forbidden) throws UnsafeException {
        int mode = mode(attrs);
        int owner = owner(attrs);
        if ((mode & TYPE) == LINK) {
            throw new UnsafeException(p + " is a symbolic link");
        }
        if ((mode & TYPE) != type) {
            throw new UnsafeException(p + " is not a " + (type == DIRECTORY ? "folder" : "regular file"));
        }
        if (owner != uid) {
            throw new UnsafeException(p + " is owned by user id " + owner + ", not by this user (" + uid + ")");
        }
        if ((mode & forbidden) != 0) {
            throw new UnsafeException(p + " has mode " + octal(mode) + ": group or others may "
                    + ((mode & GROUP_OR_OTHERS_WRITE) != 0 ? "write" : "read") + " it");
        }
    }

    private static Map<String, Object> stat(Path p) throws IOException {
        return Files.readAttributes(p, "unix:mode,uid", LinkOption.NOFOLLOW_LINKS);
    }

    private static Map<String, Object> statIfExists(Path p) throws IOException {
        try {
            return stat(p);
        } catch (NoSuchFileException e) {
            return null;
        }
    }

    private static int mode(Map<String, Object> attrs) {
        return (Integer) attrs.get("mode");
    }

    private static int owner(Map<String, Object> attrs) {
        return (Integer) attrs.get("uid");
    }

    private static String octal(int mode) {
        return String.format("%04o", mode & 07777);
    }
}
