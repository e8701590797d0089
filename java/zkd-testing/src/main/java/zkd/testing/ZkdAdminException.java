package zkd.testing;

/** The zkd admin API refused a request; {@link #status()} is the HTTP status. */
public class ZkdAdminException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;

    public ZkdAdminException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** HTTP status: 400 malformed, 404 no such session or fault, 409 refused in this state. */
    public int status() {
        return status;
    }
}
