package lab.real;

/** What a lab child process prints on stdout: whole lines, one writer at a time (`lab_cluster/processes.py`). */
public final class Lines {
    private Lines() {}

    public static synchronized void print(String text) {
        System.out.println(text);
        System.out.flush();
    }

    /** `READY {json}`: the process is up; the lab's parent waits for this line. */
    public static void ready(Object info) {
        print("READY " + Json.encode(info));
    }
}
