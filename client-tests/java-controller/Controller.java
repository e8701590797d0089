// Sends test-controller commands with ZooKeeper's own client for them
// (org.apache.zookeeper.server.controller.CommandClient, over Jetty's HttpClient).
// usage: java -cp JARS Controller.java PORT ACTION[/PARAMETER]...
// Prints one line per command: the command and whether the server answered 200.

import org.apache.zookeeper.server.controller.CommandClient;
import org.apache.zookeeper.server.controller.ControlCommand;

public class Controller {
    public static void main(String[] args) {
        CommandClient client = new CommandClient(Integer.parseInt(args[0]));
        for (int i = 1; i < args.length; i++) {
            String[] parts = args[i].split("/", 2);
            ControlCommand.Action action = ControlCommand.Action.valueOf(parts[0]);
            boolean ok = parts.length > 1
                ? client.trySendCommand(action, parts[1])
                : client.trySendCommand(action);
            System.out.println(args[i] + " " + ok);
        }
        client.close();
    }
}
