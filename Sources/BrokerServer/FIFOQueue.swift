/// First in, first out, without NIO's CircularBuffer (BrokerServer does not link NIO): the requests a connection has
/// read beyond its in-flight limit (at most a batch's worth), taken from the front as slots free up.
struct FIFOQueue<Element> {
    private var elements: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == elements.count }
    var count: Int { elements.count - head }

    mutating func append(_ element: Element) { elements.append(element) }

    mutating func popFirst() -> Element? {
        guard head < elements.count else { return nil }
        let first = elements[head]
        head += 1
        // Taken elements are dropped once they are half the storage, or all of it: the queue never grows without end.
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        } else if head * 2 >= elements.count {
            elements.removeFirst(head)
            head = 0
        }
        return first
    }
}
